"""Helpers every stage may use: the progress protocol, package resources, sandboxed PDF output."""
