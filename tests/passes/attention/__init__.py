"""The attention pass: scaled dot-product attention in every form real code writes."""
