"""Helpers the stages share, below them: the command line every stage parses
(``stage_args``), short screening clips through Stage I and Stage II (``clip_runs``), the walk
of an asset library (``library_walk``), the inventory's level rows (``inventory_levels``), its
characters (``inventory_characters``) and how they are found without a sidecar
(``character_discovery``). Nothing here imports a stage module."""
