"""bringup-fakecpu: a third-party backend package, as a vendor would ship one (see backend.py)."""
