"""The in-tree plugins: one module per upstream plugin. ``registry`` builds them by name."""
