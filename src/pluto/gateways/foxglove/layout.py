"""The Foxglove layout shipped with Pluto, built with the SDK's layout types.

The shipped file (``pluto-layout.json`` beside this module) is :func:`pluto_layout` written out; a test keeps the two
the same. It shows a 3-D panel in the ``map`` frame following the robot (the walls, the laser scan, the pose, the
true pose and the path), a plot of the base's speed (``Base/Drive/State.v`` and ``.omega``) and the log.
"""

from __future__ import annotations

import json

import foxglove.layouts as fl

from .translate import FRAME_BASE, FRAME_MAP, TOPIC_LOG, TOPIC_MAP, TOPIC_PATH, TOPIC_POSE, TOPIC_SCAN, TOPIC_TRUTH

__all__ = ["layout_json", "pluto_layout"]


def pluto_layout() -> fl.Layout:
    """The layout: a 3-D panel (two thirds), beside a plot of speed over the log."""
    scene = fl.ThreeDeePanel(
        title="Robot",
        config=fl.ThreeDeeConfig(
            follow_tf=FRAME_BASE,
            fixed_frame=FRAME_MAP,
            follow_mode="follow-position",
            topics={
                TOPIC_MAP: fl.BaseRendererSceneUpdateTopicSettings(visible=True),
                TOPIC_SCAN: fl.BaseRendererLaserScanTopicSettings(
                    visible=True, point_size=4.0, color_mode="flat", flat_color="#ff3b30", decay_time=0.0
                ),
                TOPIC_POSE: fl.BaseRendererPoseTopicSettings(visible=True, type="arrow", color="#00c853"),
                TOPIC_TRUTH: fl.BaseRendererPoseTopicSettings(visible=True, type="arrow", color="#9e9e9e"),
                TOPIC_PATH: fl.BaseRendererPosesTopicSettings(visible=True, type="line", line_width=0.05),
            },
        ),
    )
    speed = fl.PlotPanel(
        title="Speed",
        config=fl.PlotConfig(
            paths=[
                fl.PlotSeries(value="Base/Drive/State.v", label="v (m/s)", timestamp_method="receiveTime"),
                fl.PlotSeries(value="Base/Drive/State.omega", label="ω (rad/s)", timestamp_method="receiveTime"),
            ],
        ),
    )
    log = fl.LogPanel(title="Log", config=fl.LogConfig(topic_to_render=TOPIC_LOG))
    side = fl.SplitContainer(
        direction="column",
        items=[fl.SplitItem(proportion=1, content=speed), fl.SplitItem(proportion=1, content=log)],
    )
    return fl.Layout(
        content=fl.SplitContainer(
            direction="row",
            items=[fl.SplitItem(proportion=2, content=scene), fl.SplitItem(proportion=1, content=side)],
        )
    )


def layout_json() -> str:
    """:func:`pluto_layout` as the indented JSON of the shipped file (with a final newline)."""
    return json.dumps(json.loads(pluto_layout().to_json()), indent=2, ensure_ascii=False) + "\n"
