"""lanes"""
