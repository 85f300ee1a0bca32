/* turnfleet agent: the relay pod's sidecar, on relayctl. Private to the tool. */
#ifndef TURNFLEET_TOOL_AGENT_H
#define TURNFLEET_TOOL_AGENT_H

/* `turnfleet agent ...` and `turnfleet agent prestop ...`: argv[0] is "agent". Returns the exit code. */
int agent_main(int argc, char **argv);

#endif
