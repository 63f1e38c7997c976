package hooks

// TimeViewEnded reports whether the engine has ended the term of tv, a
// *leaderelection.TimeView, for good (release, ousting, a stop), whatever the
// clocks say. The leaderelection package sets it; the simulation's checker
// reads it because it must judge a TimeView without reading the engine's
// clock (its reads take part in fault injection).
var TimeViewEnded func(tv any) bool

// EndTimeView ends the term of tv, a *leaderelection.TimeView, for good, as
// the engine does: the engine then neither extends it nor releases it, and
// leaves it to expire. The leaderelection package sets it; package legrpc's
// Guard calls it when admitted calls outlast the term they were admitted in.
var EndTimeView func(tv any)

// ReturnedEarly marks tv, a *leaderelection.TimeView, as the term of a
// tenure whose OnElected returned while the term was held, so that the
// engine pauses before campaigning again even if what wraps OnElected (a
// Guard draining its calls) returns only once the term has run out.
var ReturnedEarly func(tv any)
