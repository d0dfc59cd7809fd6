"""Production execution (DESIGN §6): the node runner (slots, slot lifecycle, stall detection,
retries, failure snapshots), the progress/recovery protocol on the scheduler's side, and the
skip keys that decide what is already done."""
