"""The rank processes of a collectives run: launching, supervising, the workers themselves, and their channel."""
