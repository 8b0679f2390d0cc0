"""Loading one page in Firefox: preferences, fresh profiles, the engines (Selenium,
Browsertime), metrics from the browser's own APIs and the verification of each load."""
