"""Pure-PyTorch trial engine (decode, speculative, block diffusion) for the planner; no Django here.

Import the submodules (jobs.trials.decode, ...): this package file imports nothing, so importing jobs.trials
does not load torch.
"""
