"""Advisors, read from the store's views or a profile: rank placement from a communication matrix (placement),
debugging barriers (barriers), collective algorithm tuning (collectives) and halo overlap and imbalance
(overlap)."""
