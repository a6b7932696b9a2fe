"""pacing"""
