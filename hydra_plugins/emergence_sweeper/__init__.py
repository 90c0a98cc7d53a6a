"""Hydra plugin: the revision-expanding sweeper of emergence."""
