#!/usr/bin/env bash
# Drive the robot DISTANCE metres forward through Pluto's XML gateway, with nothing but bash.
#
#   usage: xml_drive.sh [DISTANCE [SPEED]]          defaults: 1.0 m at 0.3 m/s
#   environment:
#     PLUTO_XML_HOST, PLUTO_XML_PORT   the server (default 127.0.0.1 7650; start it with `pluto xmlserver`)
#     PLUTO_XML_TOKEN                  the shared secret, if the server wants one
#     PLUTO_XML_COMMAND                the command interface (default drive/command: the drive module; write
#                                      Base/Drive/Command to command the base directly)
#     PLUTO_XML_POSE                   the pose interface (default Localization/Pose)
#
# The protocol is one XML document per line over TCP, so bash's own /dev/tcp is all a client needs: print a
# document and a newline, read a line back. The loop is paced by a subscription to the pose (10 updates a second):
# at each update it measures the distance driven since the start and writes the next velocity command
# (an ActuatorState: cmd_flags 0, velocity = v m/s, omega rad/s), then the stop command once it is far enough.
set -euo pipefail

distance=${1:-1.0}
speed=${2:-0.3}
host=${PLUTO_XML_HOST:-127.0.0.1}
port=${PLUTO_XML_PORT:-7650}
command=${PLUTO_XML_COMMAND:-drive/command}
pose=${PLUTO_XML_POSE:-Localization/Pose}

die() { echo "xml_drive: $*" >&2; exit 1; }

exec 3<>"/dev/tcp/$host/$port" || die "cannot connect to $host:$port (is \`pluto xmlserver\` running?)"

send() { printf '%s\n' "$1" >&3; }
receive() { IFS= read -r -t 10 line <&3 || die "no answer from the server within 10 s"; }
attribute() { if [[ $line =~ [[:space:]]$1=\"([^\"]*)\" ]]; then printf '%s' "${BASH_REMATCH[1]}"; fi; }
escape() { local s=${1//&/&amp;}; s=${s//</&lt;}; printf '%s' "${s//\"/&quot;}"; }

# Metres written as a decimal (1.25, -0.5, 3e-05) to whole millimetres, in bash's integer arithmetic.
mm() {
    local s=$1 sign=
    if [[ $s == -* ]]; then sign=-; s=${s#-}; fi
    if [[ $s == *[eE]-* ]]; then echo 0; return; fi  # |x| < 1e-4 m
    local whole=${s%%.*} frac=
    if [[ $s == *.* ]]; then frac=${s#*.}; fi
    frac=${frac}000
    echo $((${sign}(10#${whole:-0} * 1000 + 10#${frac:0:3})))
}

velocity() {
    send "<write name=\"$command\"><ActuatorState cmd_flags=\"0\"><velocity>$1 0</velocity></ActuatorState></write>"
}

receive
[[ $line == "<hello"* ]] || die "not a Pluto XML server: $line"
if [[ $(attribute auth) == token ]]; then
    [[ -n ${PLUTO_XML_TOKEN:-} ]] || die "the server needs a token: set PLUTO_XML_TOKEN"
    send "<auth token=\"$(escape "$PLUTO_XML_TOKEN")\"/>"
    receive
    [[ $line == "<authorized"* ]] || die "refused: $line"
fi

send "<subscribe name=\"$pose\" rate=\"10\"/>"
goal=$(mm "$distance")
start_x='' start_y='' dx=0 dy=0
while true; do
    receive
    case $line in
        "<error"*) die "error: $line" ;;
        "<update"*) ;;
        *) continue ;;  # <subscribed>, <written>
    esac
    [[ $line =~ \<pose\>([^\ \<]+)\ ([^\ \<]+) ]] || continue
    x=${BASH_REMATCH[1]} y=${BASH_REMATCH[2]}
    if [[ -z $start_x ]]; then
        start_x=$(mm "$x") start_y=$(mm "$y")
        echo "start pose: x=$x y=$y"
    fi
    dx=$(($(mm "$x") - start_x)) dy=$(($(mm "$y") - start_y))
    ((dx * dx + dy * dy >= goal * goal)) && break
    velocity "$speed"
done
velocity 0
send "<unsubscribe name=\"$pose\"/>"
until [[ $line == "<unsubscribed"* ]]; do  # the stop command has been written when this reply comes
    receive
    [[ $line == "<error"* ]] && die "error: $line"
done
echo "moved ${dx} mm along x and ${dy} mm along y: pose x=$x y=$y"
exec 3>&-
