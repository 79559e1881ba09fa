"""OASiS: online admission under dual prices (:mod:`.online`) and the slotted
admission policies with their baselines (:mod:`.admission`)."""
