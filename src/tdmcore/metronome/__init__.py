"""Metronome (paper 000): the traffic circle, the rotation search, the base
period, one link's plan, the affinity graph, the placement policies and the
stop-and-wait controller."""
