"""coordinator/group"""
