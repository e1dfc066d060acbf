//go:build usb4front

/*
 * The Go part's engine (cshim/gopart is built with the usb4front tag): no
 * engine of its own, every entry point its Go code calls goes to the front
 * library's engine through the table the front hands over at usb4goStart
 * (engine_api.h). The definitions below must match engine.h's prototypes,
 * which the compiler checks. Hidden: the Go part exports none of them.
 */
#include "engine.h"
#include "engine_api.h"

#pragma GCC visibility push(hidden)

/* Set once, at usb4goStart, before any Go code calls the engine. */
static const struct usb4v_engine_api *front;

void usb4v_use_front(const struct usb4v_engine_api *api)
{
	front = api;
}

#define USB4V_FRONT_DEF_R(ret, name, params, args)                                                           \
	ret usb4v_##name params                                                                              \
	{                                                                                                    \
		return front->name args;                                                                     \
	}
#define USB4V_FRONT_DEF_V(name, params, args)                                                                \
	void usb4v_##name params                                                                             \
	{                                                                                                    \
		front->name args;                                                                            \
	}
USB4V_ENGINE_API(USB4V_FRONT_DEF_R, USB4V_FRONT_DEF_V)

#pragma GCC visibility pop
