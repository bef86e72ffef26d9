"""Software scoreboard tokens (Intel Gen12+ SBID) and the memory latency model behind them."""

from .memory import SbidMemory
from .tokens import TOKEN_COUNTS, SbidTokens, token_layouts

__all__ = ["SbidTokens", "SbidMemory", "token_layouts", "TOKEN_COUNTS"]
