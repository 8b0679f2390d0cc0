"""The compose substrate: the five roles as containers of docker-compose.yml, each
running `clarke serve ROLE` (clarke.agent.serve) in its container (clarke.place).

substrate.py  the runner's side, in the client container: the session's substrate
health.py     the containers' HEALTHCHECK (the role agent answers)
"""
