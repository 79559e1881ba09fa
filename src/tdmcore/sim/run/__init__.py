"""The parts of one cluster run (:func:`tdmcore.sim.cluster.run_cluster`).

:mod:`.book` keeps the jobs: which run in the event engine, their engine parameters,
their results so far.  :mod:`.placement` places arriving and waiting gangs through
the scheduler and starts them.  :mod:`.mirror` gives the engine the controller's
view of each job and hands the controller the reports only it can take.
:mod:`.skip_ahead` computes a job alone on its links in closed form.
:mod:`.sampling` samples the links' utilisation.  :mod:`.loop` runs the event loop
over all of them and finishes jobs.
"""
