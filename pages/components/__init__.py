"""Pieces of pages that are not pages themselves (the navigation lists only the modules directly under pages/)."""
