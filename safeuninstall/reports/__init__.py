"""Reports on an environment, read only: what a removal breaks (impact), which candidates a
cleanup must keep (needs), what is broken now and how to repair it (doctor), the whole
environment at once (audit)."""
