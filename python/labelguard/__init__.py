"""labelguard"""
