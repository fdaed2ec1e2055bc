"""profiles/sections"""
