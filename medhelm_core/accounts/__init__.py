"""Who may do what: users and their passwords, signed-in sessions and the sign-in back-off, roles.
"""
