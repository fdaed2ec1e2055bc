"""Verified capability checks for `bringup probe`: each one executes something and records evidence."""
