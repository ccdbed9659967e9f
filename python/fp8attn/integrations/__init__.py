"""Integrations of fp8attn with other libraries (each module imports its library only when imported itself).

    fp8attn.integrations.transformers   Hugging Face transformers: attn_implementation="fp8attn"
"""
