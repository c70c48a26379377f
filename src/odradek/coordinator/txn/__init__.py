"""coordinator/txn"""
