"""The stop-and-wait controller's rooms (paper §III-C): its settings and values
(:mod:`.config`), the link plans (:mod:`.planner`), the global offsets as a pure
value (:mod:`.alignment`) and the continuous regulation (:mod:`.monitor`).  The
facade that ties them together is :class:`tdmcore.metronome.controller.Controller`."""
