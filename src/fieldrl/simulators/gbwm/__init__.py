"""Goals-based wealth management simulator: the market and goals engine (``engine``), its exact
dynamic-programming optimum (``dp``) and a slow reference implementation the tests compare with
(``reference``). numpy only."""
