"""The satellite link: profiles (what to emulate) and the backends that emulate it."""
