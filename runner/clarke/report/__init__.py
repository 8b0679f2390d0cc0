"""`clarke report`: a self-contained HTML report of a campaign, with the GEO study's
figure types as inline SVG."""
