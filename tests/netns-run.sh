#!/bin/sh
# Run a command in a network namespace of its own, with only its loopback up: suites that bind
# fixed loopback addresses (127.0.0.0/8, ::1) run beside each other, each on its own loopback,
# without a lock between them. Root (unshare --net); the namespace goes with the command.
#   netns-run.sh COMMAND [ARG...]
exec unshare --net sh -c 'ip link set lo up && exec "$@"' netns-run "$@"
