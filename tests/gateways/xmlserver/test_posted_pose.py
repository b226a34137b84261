"""A pose posted through the XML gateway (where it is made writable): its covariance must be one before it reaches
localization."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.gateways.xmlserver.module import XmlServerModule
from tests.gateways.xmlserver.client import XmlClient, error_code
from tests.helpers import wait_until

WRITE = (
    '<write id="{id}" name="Localization/Post_Pose"><PoseEstimate cmd_flags="-1"><pose>1 2 0 0.5 0 0</pose>'
    "<covariance>{covariance}</covariance></PoseEstimate></write>"
)


@pytest.mark.parametrize(
    ("covariance", "reason"),
    [
        ("-1 0 0 0 1 0 0 0 1", "Localization/Post_Pose covariance[0] = -1 is a variance: it is out of range [0, "),
        ("1 0.5 0 0 1 0 0 0 1", "Localization/Post_Pose covariance is not symmetric: [1] = 0.5 but [3] = 0"),
        ("1 2 0 2 1 0 0 0 1", "Localization/Post_Pose covariance is not positive semi-definite"),
    ],
)
def test_a_posted_covariance_that_cannot_be_one_is_refused_and_counted(
    bus: Bus, start_server: Callable[..., XmlServerModule], covariance: str, reason: str
) -> None:
    server = start_server(writable=["Localization/Post_Pose"])  # a station that may set the robot's pose
    posts: list[msgs.PoseEstimate] = []
    bus.create_subscription("Localization/Post_Pose", posts.append, msgs.PoseEstimate, depth=8, current=False)
    with XmlClient(server.server.address) as client:
        client.start()
        reply = client.request(WRITE.format(id="bad", covariance=covariance))
        assert (error_code(reply), reply.get("id")) == ("bad-value", "bad"), reply.attrib
        assert reason in reply.get("reason", ""), reply.attrib
        # the session goes on, and a covariance that is one goes through
        assert client.request(WRITE.format(id="good", covariance="0.01 0 0 0 0.01 0 0 0 0.001")).tag == "written"
        wait_until(lambda: posts, message="the good post arrives")
        assert [p.covariance[0] for p in posts] == [0.01]  # only the good one reached the bus
        (mine,) = server.server.stats().clients
        assert mine.out_of_range == 1
