"""Self-play arena: games, agents, leagues, replays and the learners they feed."""

# A worker process finds the modules its parent's person named (`--plugin`, `module:Class`), and no others.
from arena.usercode import install_from_environment as _install_named_modules

_install_named_modules()
