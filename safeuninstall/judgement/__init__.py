"""Judging an environment: probes, the derived probe, impact, libraries and ELF, what is
needed, doctor, audit, plans. It reads; it changes nothing."""
