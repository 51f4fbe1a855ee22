"""Small shared parts at the bottom: errors, outcomes, events, interrupts, the one process
runner, and file helpers."""
