"""The rail env's action codes (its ``Discrete(8)`` space) and decision kinds, importable without Flatland."""

NOOP, DEPART, HOLD, CANCEL, LEFT, FORWARD, RIGHT, STOP = range(8)

#: what a train's pending decision is: none, dispatch (depart / hold / cancel), route (at a switch)
NONE, DISPATCH, ROUTE, EVERY = range(4)
