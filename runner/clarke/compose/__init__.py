"""The compose substrate: the five roles as containers of docker-compose.yml.

serve.py     inside each role's container: its network plumbing, its implementation
             (satlink, OpenSAND, origin, OpenLiteSpeed) and its role agent
session.py   the runner's side, in the client container: drives the roles through
             their agents like the netns substrate does (run/driver.py)
containers.py what both need to know about a container's own network
"""
