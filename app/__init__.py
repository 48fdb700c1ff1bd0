"""The web UI and the command line of the MIA research assistant."""
