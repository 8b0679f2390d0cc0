"""Implementations of the link roles (terminal, satellite, gateway), one registry entry
each (clarke.registry): satlink (satlink.py), opensand (opensand/), netem (netem.py).
Profiles, what they emulate, are clarke.profiles."""
