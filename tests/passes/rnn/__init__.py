"""The recurrent cell and loop passes."""
