package hooks

// TimeViewEnded reports whether the engine has ended the term of tv, a
// *leaderelection.TimeView, for good (release, ousting, a stop), whatever the
// clocks say. The leaderelection package sets it; the simulation's checker
// reads it because it must judge a TimeView without reading the engine's
// clock (its reads take part in fault injection).
var TimeViewEnded func(tv any) bool
