"""pve-sim: a simulated Proxmox VE cluster whose containers are real SSH hosts.

Serves the Proxmox VE REST API under /api2/json over HTTPS and backs every
container with a network namespace running a chrooted OpenSSH server.
Standard library only. The executable is ../pve-sim; README.md beside it
describes the behaviour and maps the modules of this package.
"""
