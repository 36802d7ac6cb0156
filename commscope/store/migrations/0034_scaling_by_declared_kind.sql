-- Scaling pairs by the declared kind of each parameter (issue 33 item 4): filled in by the commit that follows.
SELECT 1;
