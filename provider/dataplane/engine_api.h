/*
 * The engine's entry points that Go code of provider/dataplane calls, as a
 * table: the front library (cshim/golib.c) fills a struct usb4v_engine_api
 * with its own engine's functions and hands it to the Go part at
 * usb4goStart, and the Go part, built with the usb4front tag, compiles no
 * engine of its own: every C.usb4v_* call of provider/dataplane goes through
 * that table (front.c), so one copy of the engine, the front's, makes,
 * drives, marks and frees every data-path object (docs/DESIGN.md, "Locks
 * and device removal"). Go programs without the front (ibvinfo, tests) build
 * without the tag and link the engine themselves.
 *
 * One line per function: R(return type, name without usb4v_, (parameters),
 * (arguments)) for functions that return a value, V(name, (parameters),
 * (arguments)) for void ones. A function Go calls that is missing here is
 * an undefined symbol of the Go part, which cshim's TestGoPartHasNoEngine
 * catches (the c-shared link allows it, the dlopen would fail).
 */
#ifndef USB4V_ENGINE_API_H
#define USB4V_ENGINE_API_H

#define USB4V_ENGINE_API(R, V)                                                                               \
	R(int, post_send, (struct usb4v_qp * qp, struct usb4v_ibv_send_wr * wr, struct usb4v_ibv_send_wr * *bad), \
	  (qp, wr, bad))                                                                                     \
	R(int, post_recv, (struct usb4v_qp * qp, struct usb4v_ibv_recv_wr * wr, struct usb4v_ibv_recv_wr * *bad), \
	  (qp, wr, bad))                                                                                     \
	R(int, post_srq_recv,                                                                                \
	  (struct usb4v_srq * srq, struct usb4v_ibv_recv_wr * wr, struct usb4v_ibv_recv_wr * *bad), (srq, wr, bad)) \
	R(int, poll_cq, (struct usb4v_cq * cq, int ne, struct usb4v_ibv_wc *wc), (cq, ne, wc))               \
	R(int, req_notify_cq, (struct usb4v_cq * cq, int solicited_only), (cq, solicited_only))              \
	V(cq_cursor_init, (struct usb4v_cq_cursor * c), (c))                                                 \
	V(cq_cursor_destroy, (struct usb4v_cq_cursor * c), (c))                                              \
	R(int, cq_start_poll, (struct usb4v_cq * cq, struct usb4v_cq_cursor *c), (cq, c))                    \
	R(int, cq_next_poll, (struct usb4v_cq * cq, struct usb4v_cq_cursor *c), (cq, c))                     \
	V(cq_end_poll, (struct usb4v_cq * cq, struct usb4v_cq_cursor *c), (cq, c))                           \
	R(struct usb4v_cq *, cq_new, (const struct usb4v_sys *sys, int cmd_fd, uint32_t handle, uint32_t cqe), \
	  (sys, cmd_fd, handle, cqe))                                                                        \
	R(int, cq_attach_rxe, (struct usb4v_cq * cq, void *addr, uint64_t offset, size_t size),              \
	  (cq, addr, offset, size))                                                                          \
	R(int, cq_try_shm,                                                                                   \
	  (struct usb4v_cq * cq, const struct usb4v_tbv_uresp_create_cq *tail, uint32_t requested_cqe),      \
	  (cq, tail, requested_cqe))                                                                         \
	V(cq_resize_begin, (struct usb4v_cq * cq), (cq))                                                     \
	R(int, cq_resize_end, (struct usb4v_cq * cq, int remap, uint64_t offset, size_t size),               \
	  (cq, remap, offset, size))                                                                         \
	V(cq_free, (struct usb4v_cq * cq), (cq))                                                             \
	R(struct usb4v_srq *, srq_new, (const struct usb4v_sys *sys, int cmd_fd, uint32_t handle, uint32_t max_sge), \
	  (sys, cmd_fd, handle, max_sge))                                                                    \
	R(int, srq_attach_rxe, (struct usb4v_srq * srq, void *addr, uint64_t offset, size_t size),           \
	  (srq, addr, offset, size))                                                                         \
	V(srq_resize_begin, (struct usb4v_srq * srq), (srq))                                                 \
	R(int, srq_resize_end, (struct usb4v_srq * srq, int remap, uint64_t offset, size_t size),            \
	  (srq, remap, offset, size))                                                                        \
	V(srq_free, (struct usb4v_srq * srq), (srq))                                                         \
	R(struct usb4v_srq *, srq_new_emu,                                                                   \
	  (const struct usb4v_sys *sys, int cmd_fd, uint32_t max_wr, uint32_t max_sge, uint32_t limit,       \
	   uint64_t user_handle),                                                                            \
	  (sys, cmd_fd, max_wr, max_sge, limit, user_handle))                                                \
	R(int, srq_emu_attach, (struct usb4v_srq * srq, struct usb4v_qp *qp, uint32_t depth), (srq, qp, depth)) \
	R(int, srq_emu_modify, (struct usb4v_srq * srq, uint32_t max_wr, uint32_t limit, int mask),          \
	  (srq, max_wr, limit, mask))                                                                        \
	V(srq_emu_stats, (struct usb4v_srq * srq, struct usb4v_srq_emu_stats *st), (srq, st))                \
	V(srq_emu_set_event_fd, (struct usb4v_srq * srq, int fd), (srq, fd))                                 \
	R(uint32_t, srq_emu_lent, (struct usb4v_qp * qp), (qp))                                              \
	R(struct usb4v_qp *, qp_new,                                                                         \
	  (const struct usb4v_sys *sys, int cmd_fd, uint32_t handle, uint32_t qp_num, uint32_t qp_type,      \
	   int sq_sig_all, uint32_t max_send_sge, uint32_t max_recv_sge, uint32_t max_inline,                \
	   struct usb4v_cq *send_cq, struct usb4v_cq *recv_cq, struct usb4v_srq *srq),                       \
	  (sys, cmd_fd, handle, qp_num, qp_type, sq_sig_all, max_send_sge, max_recv_sge, max_inline, send_cq, \
	   recv_cq, srq))                                                                                    \
	R(int, qp_attach_rxe,                                                                                \
	  (struct usb4v_qp * qp, void *sq_addr, uint64_t sq_off, size_t sq_size, void *rq_addr, uint64_t rq_off, \
	   size_t rq_size),                                                                                  \
	  (qp, sq_addr, sq_off, sq_size, rq_addr, rq_off, rq_size))                                          \
	R(int, dv_query_caps,                                                                                \
	  (const struct usb4v_sys *sys, int cmd_fd, uint32_t driver_id,                                      \
	   struct usb4v_usb4_rdma_dv_query_caps_resp *caps),                                                 \
	  (sys, cmd_fd, driver_id, caps))                                                                    \
	R(int, qp_try_dv,                                                                                    \
	  (struct usb4v_qp * qp, uint32_t driver_id, const struct usb4v_usb4_rdma_dv_query_caps_resp *caps,  \
	   uint32_t max_send_wr),                                                                            \
	  (qp, driver_id, caps, max_send_wr))                                                                \
	R(int, qp_defer_dv,                                                                                  \
	  (struct usb4v_qp * qp, uint32_t driver_id, const struct usb4v_usb4_rdma_dv_query_caps_resp *caps,  \
	   uint32_t max_send_wr),                                                                            \
	  (qp, driver_id, caps, max_send_wr))                                                                \
	V(qp_set_state, (struct usb4v_qp * qp, int state), (qp, state))                                      \
	V(qp_free, (struct usb4v_qp * qp, uint32_t driver_id), (qp, driver_id))                              \
	V(qp_free_destroyed, (struct usb4v_qp * qp), (qp))                                                   \
	R(struct usb4v_dev *, dev_new, (void), ())                                                           \
	V(dev_put, (struct usb4v_dev * dev), (dev))                                                          \
	V(cq_join, (struct usb4v_cq * cq, struct usb4v_dev *dev), (cq, dev))                                 \
	V(qp_join, (struct usb4v_qp * qp, struct usb4v_dev *dev), (qp, dev))                                 \
	V(srq_join, (struct usb4v_srq * srq, struct usb4v_dev *dev), (srq, dev))                             \
	V(cq_forget_dev, (struct usb4v_cq * cq), (cq))                                                       \
	V(qp_forget_dev, (struct usb4v_qp * qp), (qp))                                                       \
	V(srq_forget_dev, (struct usb4v_srq * srq), (srq))                                                   \
	R(int, dev_remove, (struct usb4v_dev * dev), (dev))                                                  \
	R(const char *, backend_name, (int backend), (backend))                                              \
	R(int, dv_kick_mode, (const struct usb4v_qp *qp), (qp))                                              \
	R(uint64_t, dv_kicks, (const struct usb4v_qp *qp), (qp))                                             \
	R(int, dv_owner, (const struct usb4v_qp *qp), (qp))                                                  \
	R(uint64_t, wrex_supported_ops, (int send_backend, uint32_t qp_type, int has_atomic_write),          \
	  (send_backend, qp_type, has_atomic_write))                                                         \
	R(int, qp_enable_wrex, (struct usb4v_qp * qp, uint64_t ops, uint32_t max_send_wr), (qp, ops, max_send_wr)) \
	V(wr_start, (struct usb4v_qp * qp), (qp))                                                            \
	R(int, wr_complete, (struct usb4v_qp * qp), (qp))                                                    \
	V(wr_abort, (struct usb4v_qp * qp), (qp))                                                            \
	V(wr_build, (struct usb4v_qp * qp, const struct usb4v_ibv_send_wr *tmpl), (qp, tmpl))                \
	V(wr_set_sge_list, (struct usb4v_qp * qp, size_t n, const struct usb4v_ibv_sge *sge), (qp, n, sge))  \
	V(wr_set_inline_list, (struct usb4v_qp * qp, size_t n, const struct usb4v_ibv_data_buf *buf), (qp, n, buf)) \
	V(uwc_to_ibv, (const struct usb4v_ib_uverbs_wc *in, struct usb4v_ibv_wc *out), (in, out))            \
	R(int, shm_validate,                                                                                 \
	  (const struct usb4v_tbv_cq_shm *hdr, const struct usb4v_tbv_uresp_create_cq *tail, uint32_t requested_cqe, \
	   size_t mapped_len, const char **why),                                                             \
	  (hdr, tail, requested_cqe, mapped_len, why))                                                       \
	R(int, dv_encode_wqe,                                                                                \
	  (const struct usb4v_ibv_send_wr *wr, uint32_t caps, uint8_t gen, struct usb4v_usb4_rdma_dv_wqe *out), \
	  (wr, caps, gen, out))                                                                              \
	V(dv_cqe_to_ibv, (const struct usb4v_usb4_rdma_dv_cqe *cqe, uint32_t qp_num, struct usb4v_ibv_wc *out), \
	  (cqe, qp_num, out))

#define USB4V_ENGINE_API_MEMBER_R(ret, name, params, args) ret(*name) params;
#define USB4V_ENGINE_API_MEMBER_V(name, params, args) void(*name) params;
struct usb4v_engine_api {
	USB4V_ENGINE_API(USB4V_ENGINE_API_MEMBER_R, USB4V_ENGINE_API_MEMBER_V)
};

#endif
