"""Stage II's compute renderer (issue #30): visibility, materials and the G-buffer in torch
(the same code on CPU and CUDA), with no GL involved."""
