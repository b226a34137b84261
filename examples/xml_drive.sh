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
#     PLUTO_XML_STALL                  pose updates without progress after which the robot counts as blocked
#                                      (default 30: 3 s)
#
# The protocol is one XML document per line over TCP, so bash's own /dev/tcp is all a client needs: print a
# document and a newline, read a line back. First it asks the module behind the command interface (the drive, or
# the base) whether it runs (a call to its MOM service), and stops with a clear message if not: commands nobody
# reads would go nowhere. The loop is paced by a subscription to the pose (10 updates a second): at each update it
# measures the distance driven since the start and writes the next velocity command (an ActuatorState: cmd_flags 0,
# velocity = v m/s, omega rad/s), then the stop command once it is far enough. If the robot gets no further for
# PLUTO_XML_STALL updates (an obstacle: the drive's sonar protection stopped it), it writes the stop command and
# exits with status 2.
set -euo pipefail

distance=${1:-1.0}
speed=${2:-0.3}
host=${PLUTO_XML_HOST:-127.0.0.1}
port=${PLUTO_XML_PORT:-7650}
command=${PLUTO_XML_COMMAND:-drive/command}
pose=${PLUTO_XML_POSE:-Localization/Pose}
stall=${PLUTO_XML_STALL:-30}
case $command in
    drive/command) module=drive ;;
    Base/Drive/Command) module=base ;;
    *) module='' ;;
esac

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

# Integer square root (Newton's method): the distance in mm from its square.
isqrt() {
    local n=$1 x=$1 y
    ((n < 2)) && { echo "$n"; return; }
    y=$(((x + 1) / 2))
    while ((y < x)); do x=$y y=$(((x + n / x) / 2)); done
    echo "$x"
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

if [[ -n $module ]]; then
    send "<call service=\"mom/$module\" timeout=\"3\"/>"
    receive
    [[ $line == "<error"* ]] && die "the $module module is not running, so nothing would obey $command (start it: \
\`pluto start $module\`, or \`pluto up mission\`): $line"
fi

send "<subscribe name=\"$pose\" rate=\"10\"/>"
goal=$(mm "$distance")
start_x='' start_y='' dx=0 dy=0 best=0 still=0 blocked=0
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
    # progress: 10 mm further from the start than ever before; none for $stall updates: blocked
    if ((dx * dx + dy * dy > (best + 10) * (best + 10))); then
        best=$(isqrt $((dx * dx + dy * dy))) still=0
    else
        still=$((still + 1))
    fi
    if ((still >= stall)); then blocked=1; break; fi
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
if ((blocked)); then
    echo "xml_drive: blocked: no progress for $stall pose updates, stopped $best mm from the start (goal $goal mm)" >&2
    exit 2
fi
