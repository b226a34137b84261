"""Motion sequence and posture files: every construct of the format, the reference's example, errors with the
file, line and reason, and the motion directory's refusal to serve anything outside itself."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from pluto.hardware.arm.kinematics import ArmModel
from pluto.hardware.arm.motion import (
    MAX_FILE_BYTES,
    Keyframe,
    MotionFileError,
    MotionLibrary,
    MotionSequence,
    Posture,
    parse_motion,
)

# A head and two legs, to parse the reference's example and the L/R fallback.
HEAD = """
name = "head"
angle_unit = "degrees"
[[joint]]
name = "NECK:tilt"
min = -90
max = 90
[[joint]]
name = "NECK:roll"
min = -90
max = 90
[[joint]]
name = "NECK:pan"
min = -90
max = 90
[[joint]]
name = "LFrLeg:knee"
min = -90
max = 90
[[joint]]
name = "RFrLeg:knee"
min = -90
max = 90
[[joint]]
name = "Lonely"
min = -90
max = 90
[[joint]]
name = "Jaw"
type = "prismatic"
min = 0
max = 50
"""

PAN_HEAD = """#MSq
degrees
advanceTime 50
NECK:tilt\t15
NECK:roll\t0
advanceTime\t850
NECK:pan~\t-45
advanceTime\t900
NECK:pan~\t45
NECK:tilt\t15
NECK:roll\t0
#END
"""

TILT, ROLL, PAN, LKNEE, RKNEE, LONELY, JAW = range(7)


@pytest.fixture(scope="module")
def head() -> ArmModel:
    return ArmModel.from_toml(HEAD, where="head.toml")


def sequence(text: str, model: ArmModel, files: dict[str, str] | None = None) -> MotionSequence:
    def loader(name: str) -> tuple[str, str]:
        if files is None or name not in files:
            raise MotionFileError(name, 0, "no such motion file")
        return files[name], name

    parsed = parse_motion(text, model, "test.mot", loader)
    assert isinstance(parsed, MotionSequence)
    return parsed


def frames(seq: MotionSequence, index: int) -> list[tuple[float, float, float]]:
    return [(round(f.time, 9), round(f.value, 12), f.weight) for f in seq.keyframes[index]]


def test_the_reference_example(head: ArmModel) -> None:
    seq = sequence(PAN_HEAD, head)
    d = math.radians
    assert frames(seq, TILT) == [(0.05, round(d(15), 12), 1.0), (1.8, round(d(15), 12), 1.0)]
    assert frames(seq, ROLL) == [(0.05, 0.0, 1.0), (1.8, 0.0, 1.0)]
    assert frames(seq, PAN) == [(0.9, round(d(-45), 12), 1.0), (1.8, round(d(45), 12), 1.0)]
    assert set(seq.keyframes) == {TILT, ROLL, PAN}
    assert seq.last_keyframe == pytest.approx(1.8) and seq.end == pytest.approx(1.8)


def test_time_commands_units_weights_and_comments(head: ArmModel) -> None:
    seq = sequence(
        """
        #MSq
        # a comment
        NECK:tilt 0.5 0.25
        DELAY 100
        degrees
        NECK:tilt 90
        RADIANS
        setTime 40
        NECK:roll -0.1
        advancetime 0.5
        NECK:roll 0.2 0
        #END
        """,
        head,
    )
    assert frames(seq, TILT) == [(0.0, 0.5, 0.25), (0.1, round(math.pi / 2, 12), 1.0)]
    assert frames(seq, ROLL) == [(0.04, -0.1, 1.0), (0.0405, 0.2, 0.0)]
    assert seq.end == pytest.approx(0.1)  # the playhead went back; the last keyframe is at 100 ms


def test_a_later_line_at_the_same_time_replaces_the_earlier(head: ArmModel) -> None:
    seq = sequence("#MSq\nNECK:pan 0.1\nNECK:pan 0.3 0.5\n#END\n", head)
    assert frames(seq, PAN) == [(0.0, 0.3, 0.5)]


def test_left_right_fallback_sets_both_sides(head: ArmModel) -> None:
    seq = sequence("#MSq\nadvanceTime 10\nFrLeg:knee 0.4\nLFrLeg:knee~ 0.1\n#END\n", head)
    assert frames(seq, LKNEE) == [(0.01, 0.1, 1.0)]
    assert frames(seq, RKNEE) == [(0.01, 0.4, 1.0)]
    # Only one side exists: that side is set.
    assert frames(sequence("#MSq\nonely 0.2\n#END\n", head), LONELY) == [(0.0, 0.2, 1.0)]


def test_prismatic_values_are_millimetres_whatever_the_angle_unit(head: ArmModel) -> None:
    seq = sequence("#MSq\ndegrees\nJaw 20\nNECK:pan 10\n#END\n", head)
    assert frames(seq, JAW) == [(0.0, 0.02, 1.0)]
    assert seq.keyframes[PAN][0].value == pytest.approx(math.radians(10))


def test_load_posture_applies_only_non_zero_weights_at_the_playhead(head: ArmModel) -> None:
    files = {"half.pos": "#POS\ndegrees\nNECK:tilt 30\nNECK:roll 10 0\nJaw 5 0.5\n#END\n"}
    seq = sequence("#MSq\nNECK:roll 0.3\nadvanceTime 200\nload half.pos\n#END\n", head, files)
    assert frames(seq, TILT) == [(0.2, round(math.radians(30), 12), 1.0)]
    assert frames(seq, ROLL) == [(0.0, 0.3, 1.0)]  # its weight 0 in the posture: untouched
    assert frames(seq, JAW) == [(0.2, 0.005, 0.5)]
    overlay = sequence("#MSq\nNECK:roll 0.3\nadvanceTime 200\noverlay half.pos\n#END\n", head, files)
    assert overlay.keyframes == seq.keyframes


def test_load_explicit_applies_zero_weights_and_releases_the_rest(head: ArmModel) -> None:
    files = {"some.pos": "#POS\nNECK:tilt 0.2\nNECK:roll 0.1 0\n#END\n"}
    seq = sequence("#MSq\nNECK:pan 0.3\nadvanceTime 100\nloadExplicit some.pos\n#END\n", head, files)
    assert frames(seq, TILT) == [(0.1, 0.2, 1.0)]
    assert frames(seq, ROLL) == [(0.1, 0.1, 0.0)]
    assert frames(seq, PAN) == [(0.0, 0.3, 1.0), (0.1, 0.3, 0.0)]  # released where it was
    lonely = seq.keyframes[LONELY]
    assert len(lonely) == 1 and lonely[0].weight == 0.0 and math.isnan(lonely[0].value)  # where the arm is


def test_overlay_of_a_sequence_shifts_it_and_leaves_the_playhead_at_its_end(head: ArmModel) -> None:
    files = {
        "nod.mot": "#MSq\nadvanceTime 100\nNECK:tilt 0.5\nadvanceTime 100\nNECK:tilt 0\nadvanceTime 50\n#END\n",
        "twice.mot": "#MSq\nload nod.mot\nload nod.mot\n#END\n",
    }
    seq = sequence("#MSq\nadvanceTime 1000\nOVERLAY twice.mot\nNECK:pan 1\n#END\n", head, files)
    assert frames(seq, TILT) == [(1.1, 0.5, 1.0), (1.2, 0.0, 1.0), (1.35, 0.5, 1.0), (1.45, 0.0, 1.0)]
    assert frames(seq, PAN) == [(1.5, 1.0, 1.0)]  # nod.mot ends at 250 ms (its trailing delay counts)


def test_a_posture_file_parses_to_a_posture(head: ArmModel) -> None:
    parsed = parse_motion("\n#POS\ndegrees\nNECK:pan~ 90 0.5\nFrLeg:knee -0.1\n#END\n", head, "p.pos")
    assert isinstance(parsed, Posture)
    assert parsed.values[PAN] == (pytest.approx(math.pi / 2), 0.5)
    assert parsed.values[LKNEE] == parsed.values[RKNEE] == (pytest.approx(-math.radians(0.1)), 1.0)


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("NECK:pan 1\n#END\n", 1, "must start with #MSq"),
        ("", 1, "must start with #MSq"),
        ("#MSq\nNECK:pan 1\n", 2, "missing #END"),
        ("#MSq\n#END\nNECK:pan 1\n", 3, "text after #END"),
        ("#MSq\n\nHEAD:pan 1\n#END\n", 3, "unknown output or command 'HEAD:pan'"),
        ("#MSq\nNECK:pan one\n#END\n", 2, "the value must be a number, not 'one'"),
        ("#MSq\nNECK:pan 1 -2\n#END\n", 2, "weight must be >= 0"),
        ("#MSq\nNECK:pan 1 1 1\n#END\n", 2, "a joint line is"),
        ("#MSq\nNECK:pan nan\n#END\n", 2, "must be a number"),
        ("#MSq\nNECK:pan 1e999\n#END\n", 2, "too large"),
        ("#MSq\nadvanceTime -5\n#END\n", 2, "time >= 0"),
        ("#MSq\nadvanceTime\n#END\n", 2, "takes one number"),
        ("#MSq\ndegrees 5\n#END\n", 2, "takes no argument"),
        ("#MSq\nload\n#END\n", 2, "takes one file name"),
        ("#MSq\nload missing.pos\n#END\n", 2, "cannot load 'missing.pos': no such motion file"),
        ("#MSq\nloadExplicit seq.mot\n#END\n", 2, "loadExplicit takes a posture"),
    ],
)
def test_errors_name_the_file_the_line_and_the_reason(head: ArmModel, text: str, line: int, reason: str) -> None:
    files = {"seq.mot": "#MSq\n#END\n", "self.mot": "#MSq\nload self.mot\n#END\n", "bad.pos": "#POS\nJaw x\n#END\n"}
    with pytest.raises(MotionFileError) as info:
        sequence(text, head, files)
    err = info.value
    assert reason in err.reason
    assert (err.source, err.line) == ("test.mot", line)
    assert str(err).startswith(f"test.mot:{line}: ")


def test_an_error_in_a_loaded_file_names_that_file_and_the_chain_of_loads(head: ArmModel) -> None:
    files = {"self.mot": "#MSq\nload self.mot\n#END\n", "bad.pos": "#POS\nJaw x\n#END\n"}
    files["outer.mot"] = "#MSq\n\nload bad.pos\n#END\n"
    with pytest.raises(MotionFileError) as info:
        sequence("#MSq\nload outer.mot\n#END\n", head, files)
    assert (info.value.source, info.value.line) == ("bad.pos", 2)
    assert str(info.value) == (
        "bad.pos:2: the value must be a number, not 'x' (loaded from outer.mot:3) (loaded from test.mot:2)"
    )
    with pytest.raises(MotionFileError, match="nested more than 8 deep") as info:
        sequence("#MSq\nload self.mot\n#END\n", head, files)
    assert (info.value.source, info.value.line) == ("self.mot", 2)


def test_load_without_a_motion_directory_is_an_error(head: ArmModel) -> None:
    with pytest.raises(MotionFileError, match="no motion directory"):
        parse_motion("#MSq\nload x.pos\n#END\n", head)


def test_keyframes_are_capped(head: ArmModel) -> None:
    body = "".join(f"advanceTime 1\nNECK:pan {i % 2}\n" for i in range(100_001))
    with pytest.raises(MotionFileError, match="more than 100000 keyframes"):
        sequence("#MSq\n" + body + "#END\n", head)


# -- the motion directory ---------------------------------------------------------------------------------------


@pytest.fixture
def library(tmp_path: Path, head: ArmModel) -> MotionLibrary:
    root = tmp_path / "motions"
    (root / "sub").mkdir(parents=True)
    (root / "nod.mot").write_text("#MSq\nadvanceTime 10\nNECK:tilt 0.5\n#END\n")
    (root / "sub" / "up.pos").write_text("#POS\nNECK:tilt 0.2\n#END\n")
    (root / "uses.mot").write_text("#MSq\nload sub/up.pos\nadvanceTime 20\nload nod.mot\n#END\n")
    (tmp_path / "secret.mot").write_text("#MSq\n#END\n")
    os.symlink(tmp_path / "secret.mot", root / "link.mot")
    os.symlink(root / "nod.mot", root / "alias.mot")
    (root / ".hidden.mot").write_text("#MSq\n#END\n")
    (root / "big.mot").write_text("#MSq\n" + "#" * MAX_FILE_BYTES + "\n#END\n")
    (root / "latin1.mot").write_bytes(b"#MSq\n# caf\xe9\n#END\n")
    (root / "escape.mot").write_text("#MSq\nload ../secret.mot\n#END\n")
    return MotionLibrary(root, head)


def test_the_library_loads_files_and_what_they_load(library: MotionLibrary) -> None:
    seq = library.load("uses.mot")
    assert isinstance(seq, MotionSequence)
    assert seq.keyframes[TILT] == (Keyframe(0.0, 0.2, 1.0), Keyframe(0.03, 0.5, 1.0))
    assert isinstance(library.load("sub/up.pos"), Posture)
    assert isinstance(library.load("alias.mot"), MotionSequence)  # a symlink that stays inside is fine
    assert "uses.mot" in library.names() and "sub/up.pos" in library.names()


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("../secret.mot", "not a valid motion file name"),
        ("sub/../../secret.mot", "not a valid motion file name"),
        ("/etc/passwd", "not a valid motion file name"),
        ("link.mot", "outside the motion directory"),
        (".hidden.mot", "not a valid motion file name"),
        ("sub", "not a regular file"),
        ("nothing.mot", "no such motion file"),
        ("", "not a valid motion file name"),
        ("a\x00b.mot", "not a valid motion file name"),
        ("sub//up.pos", "not a valid motion file name"),
        ("big.mot", "larger than"),
        ("latin1.mot", "not UTF-8"),
        ("escape.mot", "cannot load '../secret.mot'"),
    ],
)
def test_the_library_serves_nothing_outside_its_directory(library: MotionLibrary, name: str, reason: str) -> None:
    with pytest.raises(MotionFileError, match=reason):
        library.load(name)


def test_a_missing_motion_directory_is_an_error(tmp_path: Path, head: ArmModel) -> None:
    with pytest.raises(MotionFileError, match="does not exist"):
        MotionLibrary(tmp_path / "nope", head)


def test_the_shipped_motions_parse_for_the_lynx_arm() -> None:
    from pluto.gateways.netmotion.module import PACKAGED_MOTIONS

    library = MotionLibrary(PACKAGED_MOTIONS, ArmModel.load("LynxArm6"))
    names = library.names()
    assert {"arm_pickup_move.mot", "wave.mot", "home.pos"} <= set(names)
    for name in names:
        library.load(name)
